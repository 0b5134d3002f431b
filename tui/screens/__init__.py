"""The main screen and the modal dialogs."""
