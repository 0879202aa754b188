"""The benchmark (`make bench`, `python -m bench`): the service against its floors, the Node.js
peer, raw aioboto3 and DynamoDB Local. It imports the service, never the other way round."""

__all__: list[str] = []
