"""absl flag definitions for the entry points and their conversion to explicit configs."""
