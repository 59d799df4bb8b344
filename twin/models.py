"""The app's model registry: Django loads ``twin.models``; each domain package owns its models."""

from twin.alerts.models import (  # noqa: F401
    Alert,
    AlertRule,
)
from twin.audit.models import (  # noqa: F401
    AuditEntry,
)
from twin.control.models import (  # noqa: F401
    Drill,
    DrillStatus,
)
from twin.inventory.models import (  # noqa: F401
    Accelerator,
    AcceleratorModel,
    AcceleratorStatus,
    CloudPool,
    Cluster,
    CoolingLoop,
    DataHall,
    Link,
    LinkStatus,
    Node,
    NodeStatus,
    PowerFeed,
    Rack,
    Site,
    StorageStatus,
    StorageSystem,
    Switch,
    SwitchTier,
    non_negative,
    positive,
)
from twin.live.models import (  # noqa: F401
    EngineCommand,
    EngineEvent,
    EngineHealth,
    EngineSnapshot,
    HistorySample,
    LiveState,
)
from twin.studies.models import (  # noqa: F401  # noqa: F401
    Study,
    StudyRun,
    WhatIf,
)
