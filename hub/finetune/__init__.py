"""Fine-tuning (knowledge transfer) as a job: the request is checked here, the work runs in
``workers.finetune`` with ``hpcfair.finetune`` inside the conversion sandbox."""
