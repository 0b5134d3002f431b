"""The line session (``appliance session``): a line-based clinic terminal for scripts and SSH.
Its rules are in ``loop``'s docstring; the current patient in ``patients``, sign-in, the lock
and the saved conversation in ``saved``."""
