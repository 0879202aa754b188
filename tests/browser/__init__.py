"""Tests in a real headless Chromium, driven by Playwright for Python (fixtures in conftest.py)."""
