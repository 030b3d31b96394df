"""The live monitor: a Textual app over a Session or a replay (docs/tui.md)."""
