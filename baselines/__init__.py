"""Reference scheduling policies (the papers' schedulers and their baselines)."""
