"""Test dispatcher.
The dispatcher can choose which template to use according
to the parameters of workload

Ported from apache/tvm v0.18.0 ``tests/python/autotvm/test_autotvm_dispatch_context.py`` (Apache-2.0):
``test_fallback`` with ``@adatune.template``. ``test_tophub_kinds_match`` is not ported: adatune has no
TopHub (no pre-tuned logs are downloaded).
"""

import warnings

import adatune

if "testing/dispatch_fallback" not in adatune.task.registered_templates():

    @adatune.template("testing/dispatch_fallback")
    def simple_template(a, b):
        cfg = adatune.get_config()
        assert cfg.is_fallback


def test_fallback():
    with warnings.catch_warnings():  # the one "no tuned record, using a fallback" warning
        warnings.simplefilter("ignore")
        simple_template(2, 3)
