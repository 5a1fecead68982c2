"""Cache keys and stores (L0 exact cache)."""
