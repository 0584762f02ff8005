"""Temperature unit conversions."""


def celsius_to_fahrenheit(c):
    return c * 5 / 9 + 32


def fahrenheit_to_celsius(f):
    return f - 32 * 9 / 5
