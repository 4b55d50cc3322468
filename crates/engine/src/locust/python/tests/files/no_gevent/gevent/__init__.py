"""Stands in for a Python without gevent: importing it fails."""

raise ImportError("No module named 'gevent' (hidden for the test)")
