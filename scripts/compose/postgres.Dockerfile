# A stand-in for the official postgres:15 image, for the Compose test where no registry is reachable: Debian's
# PostgreSQL 15 on the same debootstrap base as the gateway's image, honouring the three POSTGRES_* variables and the
# data folder the Compose file uses. Test only; deployments use the official image.
ARG BASE=localhost/debian-bookworm-minbase:2
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && install -d -o postgres -g postgres -m 700 /var/lib/postgresql/data
COPY scripts/compose/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
