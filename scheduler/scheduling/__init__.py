"""The scheduler: job lifecycle, passes, placement, preemption, policies, inference, cloud."""
