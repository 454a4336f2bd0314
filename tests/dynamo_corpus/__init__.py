"""A corpus of small functions for course_lib.dynamo, in the spirit of PyTorch's
test/dynamo/test_functions.py (written for this course; see functions.py)."""
