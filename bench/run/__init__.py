"""Running cells: suite -> session -> prepare -> runner -> worker (in the stack) -> record (docs/layout.md)."""
