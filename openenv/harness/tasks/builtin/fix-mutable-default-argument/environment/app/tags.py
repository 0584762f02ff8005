"""Tag bookkeeping for notes."""


def add_tag(tag, tags=[]):
    """Append `tag` to `tags` (a new list when omitted) unless already present; return the list."""
    if tag not in tags:
        tags.append(tag)
    return tags
