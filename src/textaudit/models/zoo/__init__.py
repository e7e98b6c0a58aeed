"""The model zoo: the paper's sentiment model families, trained here on SST-2 train.

Names (:data:`~textaudit.models.zoo.names.ZOO_MODELS`, resolved by
:func:`textaudit.models.load_classifier`): ``bow``, ``cnn``, ``lstm``, ``transformer``, ``minilm``,
each with ``-gender-swap`` (trained with gender-swap augmentation), and the certified ``bow-ibp``
and ``cnn-ibp``. A name with no checkpoint in the cache (``$TEXTAUDIT_CACHE/models/<name>``) is
trained first, with a notice on stderr.

Modules: ``names`` (the table), ``build`` (train / load by name), ``train`` (the training loop),
``checkpoint``, ``vocab``, ``architectures`` (the torch modules).
"""

from textaudit.models.zoo.build import load_zoo_model, train_model
from textaudit.models.zoo.checkpoint import load_checkpoint, load_module
from textaudit.models.zoo.names import ARCHS, AUGMENTATIONS, ZOO_MODELS, checkpoint_dir, parse_name
from textaudit.models.zoo.train import TrainConfig, accuracy, fit, fit_classifier

__all__ = ["ARCHS", "AUGMENTATIONS", "ZOO_MODELS", "train_model", "load_zoo_model", "checkpoint_dir",
           "load_checkpoint", "load_module", "fit", "fit_classifier", "accuracy", "parse_name", "TrainConfig"]
