"""The bundled demo: the fictional sample corpus (``arcticqa.demo.corpus``) that ``make demo`` runs on."""
