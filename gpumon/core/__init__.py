"""Everything below the command line and the front ends: no Textual, no torch (tests/core/test_import_contract.py).

Packages, lowest first (a package imports only those below it): ``records`` < ``store`` < ``sources`` < ``probing``
< ``jobs`` < ``interference`` < ``capture``. docs/architecture.md draws them."""
