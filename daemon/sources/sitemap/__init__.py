"""The ``sitemap`` source kind: a documentation site read through its sitemap.

Owns the kind's parts, each a module: its configuration (:mod:`.config`), the
sitemap's XML (:mod:`.parse`), HTTP with retries and conditional requests
(:mod:`.client`), pages' paths and host (:mod:`.paths`), ``robots.txt`` and
``Crawl-delay`` (:mod:`.robots`), one fetch of its pages (:mod:`.fetch`),
the source itself (:mod:`.reader`), and what ``status`` and ``sources`` show of it
(:mod:`.shown`). Importing this package imports none of them.
"""
