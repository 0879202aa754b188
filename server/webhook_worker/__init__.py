"""The webhook worker, which runs beside the API in every instance: `delivery` reads the feed
once for every endpoint whose lease this instance holds and POSTs each its events, signed;
`window` is one endpoint's window of events in flight, its retries and its position."""

__all__: list[str] = []
