"""The benchmark harness (`make bench`): the service against its floors, DynamoDB Local, scale.

Not part of the service package: it imports the service, never the other way round.
"""
