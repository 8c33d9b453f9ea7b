"""One package per LiveHost service, each with the same skeleton:

- ``__main__``: entry point (``python -m services.<name>``)
- ``settings``: the service's settings (the shared ones plus its own)
- ``server``: assembles transport (gRPC servicer, Kafka consumers) around the handlers
- ``handlers``: the business logic, free of transport code
- ``clients``: connections to what the service depends on
"""
