"""What the tests and the benchmark share to run the service: its processes
(`harness.processes`) and its ASGI app called in-process (`harness.asgi`).

Neither the service nor its tests' fixtures: it imports the service, and the tests and `bench/`
import it, never the other way round.
"""

__all__: list[str] = []
