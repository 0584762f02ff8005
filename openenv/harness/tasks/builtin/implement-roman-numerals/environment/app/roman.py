"""Roman numerals."""


def to_roman(n):
    """Return the Roman numeral for 1 <= n <= 3999; raise ValueError otherwise."""
    raise NotImplementedError
