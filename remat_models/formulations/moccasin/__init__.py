"""Moccasin: retention intervals, its CP model and layout, and its paging part."""
