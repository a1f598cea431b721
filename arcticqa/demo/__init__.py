"""The bundled demo: the fictional sample corpus (``arcticqa.demo.corpus``) that ``make demo`` runs on."""

__all__: list[str] = []  # nothing re-exported: import the submodule by name
