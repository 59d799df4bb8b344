"""Why a job runs at the speed it does: fabric, storage, power, and the job-speed model."""
