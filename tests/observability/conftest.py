import os
import sys

# Reuse the e2e cluster (tests/e2e/cluster.py).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
