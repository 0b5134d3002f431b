"""One widget per module (STYLE.md "The TUI")."""
