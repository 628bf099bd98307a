"""The A2A protocol 1.0 (X4): any A2A client runs agentsite agents (tasks are traces).

app.py serves it (agent card, JSON-RPC and HTTP+JSON bindings, token auth),
handler.py maps the operations, send.py routes a message to a service, tasks.py
and listing.py read traces as tasks, updates.py streams a task from the event log.
The client side (agentsite agents calling A2A agents) is traces/collaboration/a2a_client.py.
"""
