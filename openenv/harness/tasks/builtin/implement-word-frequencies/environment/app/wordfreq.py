"""Word frequencies for a text report."""


def top_words(text, n):
    """Return the n most common words as (word, count), most common first, ties alphabetical."""
    raise NotImplementedError
