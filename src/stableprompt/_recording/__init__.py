"""From one HTTP exchange to one UsageRecord.

- ``_http``: duck-typed httpx/httpx2 helpers: header(), module_of(), byte-stream subclassing.
- ``_errors``: the one place httpx errors and HTTP error answers become ours (client and recorder).
- ``_decoders``: content-encoding decoders (identity, deflate, gzip, br, zstd), httpx-shaped.
- ``_call``: RequestState, Call, Comparison, Pending: the values of a call, stage by stage.
- ``_predecessor``: CallIndex (predecessor, turns, retries).
- ``_attribution``: attribute(), the prediction and one verdict per call (pure).
- ``_observer``: ResponseObserver, which watches a body and hands an Observation to a sink.
- ``_outcome``: Outcome; outcome_of (Pending, Observation) and record_of (-> UsageRecord), pure.
- ``_recorder``: Recorder, the stateful shell (recordable / start / register + analyse /
  observe / finish; previous_response_id; summary()).
- ``_sinks``: RecordSink, the callables a Recorder hands each stored record (deliver()).
- ``_worker``: RecordingWorker, one thread running recording jobs in order (journaled first).
- ``_deferred``: DeferredRecorder, a call's analysis and finishing as jobs on that thread
  (``record_in_thread``: the proxy, the clients, the transports).
- ``_transport``: RecordingTransport / AsyncRecordingTransport, typed on a CallRecorder protocol.
- ``_stabilize``: Stabilizer, the opt-in rewrites that cannot change a request's meaning.
- ``_stabilize_ttls``: a CachePolicy's TTLs on a stabilized request's Anthropic breakpoints.
- ``_engine_tokens``: EngineTokenizer, llama-server's own template and tokens for a request.
- ``_engine_view``: the backend seam: what an engine's slots hold, exact evidence per call.
"""
