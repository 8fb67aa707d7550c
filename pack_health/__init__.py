"""A contract version's health before agents see it: oracle, null, repeat and adversarial
checks scored through the runs pipeline, a static leak audit, the health report, and the
publish gate that keeps a draft from agents until its report clears it."""
