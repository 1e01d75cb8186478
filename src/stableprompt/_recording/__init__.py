"""From one HTTP exchange to one UsageRecord.

- ``_predecessor``: CallIndex (predecessor, turns, retries).
- ``_attribution``: attribute(), the prediction and one verdict per call (pure).
- ``_observer``: ResponseObserver, which watches a response body as it streams.
- ``_recorder``: Recorder (recordable / start / observe / finish).
- ``_transport``: RecordingTransport and AsyncRecordingTransport for httpx / httpx2 clients.
"""
