"""What caching costs and what the user chooses (layer 0, beside the provider rules of
``_policy``).

- ``_prices``: unit prices of one model on one day (USD per token), looked up once.
- ``_cache_policy``: CachePolicy, the user's caching choice (TTL per breakpoint place and
  request kind, keep-alive, explicit head cache).
- ``_keepalive_value``: what a keep-alive ping is worth (the gap distribution, the expected
  saving against the price): the scheduler decides with it, the what-if replays it.
"""
