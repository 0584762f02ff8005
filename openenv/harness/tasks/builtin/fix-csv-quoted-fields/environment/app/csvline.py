"""Parse one line of a CSV export."""


def parse_line(line):
    """Return the fields of one CSV line."""
    return line.rstrip("\n").split(",")
