"""A `locust` package that is not loadlab's: the helper must refuse to run with it."""
