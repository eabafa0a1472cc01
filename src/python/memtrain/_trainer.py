"""transformers' Trainer, its micro-steps run through Module.step(closure):
rerunnable(trainer). The Trainer's training_step computes the loss and
hands it to accelerate's backward; for the length of each micro-step that
backward is taken in hand: it hands the loss, scaled as accelerate scales
it, to memtrain, which runs its backward and, where the micro-step runs
out of budget, rolls it back and runs the Trainer's step again."""

from . import _memtrain as _native


def rerunnable(trainer):
    """`trainer` (a transformers.Trainer whose model is a memtrain.Module),
    its micro-steps run through the Module's step(closure): one that runs
    out of budget anywhere, the Trainer's own loss included, is rolled
    back and run again, bit for bit a micro-step that did not fail.
    Returns the trainer."""
    from . import Module
    module = trainer.model
    if not isinstance(module, Module):
        raise _native.UsageError(f"the Trainer's model is a {type(module).__name__}, not a memtrain.Module; give "
                                 "the Trainer model=memtrain.Module(model, budget=..., sample=...)")
    accelerator = trainer.accelerator
    if str(getattr(accelerator, "distributed_type", "NO")).split(".")[-1] in ("DEEPSPEED", "MEGATRON_LM"):
        raise _native.UsageError(f"the Trainer runs {accelerator.distributed_type}, whose backward is its own; "
                                 "memtrain.rerunnable takes plain and mixed-precision backwards")
    training_step = trainer.training_step

    def rerunnable_step(model, inputs, num_items_in_batch=None):
        result = {}

        def closure():
            taken = {}

            def backward(loss, **kwargs):
                if kwargs:
                    raise _native.UsageError(f"accelerate's backward was given {sorted(kwargs)}; memtrain."
                                             "rerunnable runs plain backwards")
                loss = loss / accelerator.gradient_accumulation_steps  # as accelerate's backward scales it
                taken["loss"] = accelerator.scaler.scale(loss) if accelerator.scaler is not None else loss

            accelerator.backward = backward
            try:
                result["loss"] = training_step(model, inputs, num_items_in_batch)
            finally:
                del accelerator.backward  # the class's again
            if "loss" not in taken:
                raise _native.UsageError("the Trainer's training_step ran no backward; memtrain.rerunnable needs "
                                         "the one it runs")
            return taken["loss"]

        module.step(closure)
        return result["loss"]

    trainer.training_step = rerunnable_step
    return trainer
