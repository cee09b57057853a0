"""Commands shared by the CLI (local mode) and the control socket, and their routing."""
