"""Agent runs: a model of an agent (uploaded, trained or built in) run over a target (a study,
or a kind's own target such as an STS suite version), as one background job. One table, one
API and one page section for every kind; a kind declares what its runs take and what they
store (component.AgentRuns), and keeps its result tables."""
