"""Multi-agent and humans (S1-S5): sub-traces (`subtraces`), questions to humans
(`humans`), the agent-to-agent inbox (`inbox`), and other agentsite instances
(`remote`). Tools and the API call these; the runner reaches them only through
hooks it is given."""
