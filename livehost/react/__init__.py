"""The ReAct baseline: a classic thought -> action -> observation agent over the same tools and the
same policy models, without skills, hooks or the prompt pipeline.

Selected per room or per experiment arm with the request state's ``policy`` = ``react:<model>``
(room state key ``policy``), or ``livehost eval run --agent react``.
"""
