"""Where each window's merged result is published for users, and reading it back."""
