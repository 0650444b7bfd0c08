"""Fine-tuning (knowledge transfer) as a job: the request is checked here, the work runs in
``hub.finetune.jobs`` with ``hpcfair.finetune`` inside the conversion sandbox."""
