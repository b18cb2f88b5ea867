# tests/security/: one test per attack, named for it (README.md has the table).
# Helper programs of an area are declared in that area's own *.mk here.
include $(sort $(filter-out tests/security/module.mk,$(wildcard tests/security/*.mk)))
