"""One widget per module (../shared/STYLE.md, "The TUI")."""
