"""Split a list into pages for display."""


def paginate(items, page, per_page=10):
    """Return the items on `page` (1-based), at most `per_page` of them."""
    start = page * per_page
    return items[start:start + per_page]
