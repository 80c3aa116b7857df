"""RerunJob and MeasuredCeiling move from the registry app to this one. Only Django's record of
them moves: their tables keep their names (`registry_rerunjob`, `registry_measuredceiling`) and
their rows, and the content types move with them, so the permissions granted on them (the
moderators' `request_rerun`) and admin history still point at them."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MOVED = ("rerunjob", "measuredceiling")


def contenttypes_relabel(apps, old: str, new: str):
    """Relabel the models' content types; a permission or an admin log entry refers to its content
    type by key, so it follows. Where both labels exist (something made the new one first), the
    old one is left for `remove_stale_contenttypes`."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if ContentType.objects.filter(app_label=new, model=model).exists():
            continue
        ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def contenttypes_forward(apps, schema_editor):
    contenttypes_relabel(apps, "registry", "reruns")


def contenttypes_backward(apps, schema_editor):
    contenttypes_relabel(apps, "reruns", "registry")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("registry", "0012_rerunjob_timed_out"),
        # The moderators' grant on registry.rerunjob is made before the content type is relabelled.
        ("attestations", "0003_moderators_request_reruns"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='RerunJob',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('rerun', 'Rerun of a recorded run'), ('measure', 'New measurement'), ('ceilings', 'Measured ceilings of a GPU model')], max_length=10)),
                        ('state', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('diverged', 'Diverged'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=10)),
                        ('provider', models.CharField(max_length=100)),
                        ('operation_mode', models.CharField(choices=[('forward', 'Forward'), ('backward', 'Backward'), ('full', 'Full (forward + backward)'), ('no-grad-forward', 'Forward without autograd (torch.no_grad)')], max_length=20)),
                        ('metric', models.CharField(choices=[('latency', 'Latency'), ('memory', 'Peak memory')], max_length=10)),
                        ('gpu_slug', models.SlugField(help_text='The GPU model that must run it.', max_length=100)),
                        ('reason', models.TextField(blank=True)),
                        ('issue_report_pk', models.PositiveIntegerField(blank=True, help_text='The issue report that asked for it, if any.', null=True)),
                        ('worker_host', models.CharField(blank=True, max_length=200)),
                        ('worker_gpu', models.CharField(blank=True, max_length=200)),
                        ('attempts', models.PositiveSmallIntegerField(default=0)),
                        ('lease', models.CharField(blank=True, help_text='Names the attempt that holds it.', max_length=40)),
                        ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                        ('result_sent_at', models.DateTimeField(blank=True, help_text='When the attempt holding the lease sent its result; until JOB_RESULT_DEADLINE after it, the job is waiting to be recorded, not lost.', null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('sent_at', models.DateTimeField(blank=True, help_text='Last time its message was sent.', null=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('unit', models.CharField(blank=True, max_length=10)),
                        ('median', models.FloatField(blank=True, null=True)),
                        ('p20', models.FloatField(blank=True, null=True)),
                        ('p80', models.FloatField(blank=True, null=True)),
                        ('ci_low', models.FloatField(blank=True, help_text='95% interval of the median.', null=True)),
                        ('ci_high', models.FloatField(blank=True, null=True)),
                        ('samples', models.JSONField(blank=True, default=list)),
                        ('tolerance', models.FloatField(blank=True, help_text='Relative; reruns only.', null=True)),
                        ('deviation', models.FloatField(blank=True, help_text='(result − recorded) / recorded; reruns only.', null=True)),
                        ('verdict', models.CharField(blank=True, choices=[('agrees', 'Agrees'), ('disagrees', 'Disagrees'), ('inconclusive', 'Inconclusive')], max_length=12)),
                        ('deviation_low', models.FloatField(blank=True, help_text='95% interval of the relative difference of medians; reruns only.', null=True)),
                        ('deviation_high', models.FloatField(blank=True, null=True)),
                        ('verdict_note', models.TextField(blank=True, help_text='What the verdict rests on, in words.')),
                        ('gpu_uuid', models.CharField(blank=True, help_text='The physical GPU that ran it (NVML).', max_length=64)),
                        ('avoid_gpu_uuid', models.CharField(blank=True, help_text='A rerun: the card that measured the run; another card of the fleet takes the job.', max_length=64)),
                        ('gpu_state', models.JSONField(blank=True, default=dict, help_text='NVML clocks, temperature, power and throttle reasons, before and after.')),
                        ('sampling', models.JSONField(blank=True, default=dict, help_text="How sampling stopped (precision or budget), the precision reached, and where the host's seconds went (process start, setup, warm-up, timing).")),
                        ('upstream', models.JSONField(blank=True, default=dict, help_text="The source protocol's own figure (upstream do_bench), unchanged.")),
                        ('environment', models.JSONField(blank=True, default=dict)),
                        ('protocol', models.JSONField(blank=True, default=dict)),
                        ('log', models.TextField(blank=True)),
                        ('error', models.TextField(blank=True)),
                        ('timed_out', models.BooleanField(default=False, help_text='It ran past its time limit and was killed (its error says which limit).')),
                        ('kernel', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='registry.kernel')),
                        ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='rerun_jobs', to=settings.AUTH_USER_MODEL)),
                        ('result_run', models.ForeignKey(blank=True, help_text='For a measure job: the run it created.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='measured_by_jobs', to='registry.benchmarkrun')),
                        ('run', models.ForeignKey(blank=True, help_text='For a rerun: the run measured again.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='rerun_jobs', to='registry.benchmarkrun')),
                        ('workload', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='registry.workload')),
                    ],
                    options={
                        'db_table': 'registry_rerunjob',
                        'ordering': ['-created_at', '-pk'],
                        'permissions': [('request_rerun', 'Can request and cancel controlled reruns and measure jobs')],
                    },
                ),
                migrations.CreateModel(
                    name='MeasuredCeiling',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('gpu_slug', models.SlugField(max_length=100)),
                        ('gpu_name', models.CharField(blank=True, max_length=200)),
                        ('measured_at', models.DateTimeField()),
                        ('memory_bandwidth', models.FloatField(help_text='GB/s (10^9 bytes/s), bytes read plus bytes written.')),
                        ('memory_bandwidth_low', models.FloatField(blank=True, null=True)),
                        ('memory_bandwidth_high', models.FloatField(blank=True, null=True)),
                        ('bf16_tflops', models.FloatField(help_text='Dense bf16 GEMM, TFLOP/s (10^12 FLOP/s).')),
                        ('bf16_tflops_low', models.FloatField(blank=True, null=True)),
                        ('bf16_tflops_high', models.FloatField(blank=True, null=True)),
                        ('document', models.JSONField(help_text='The whole measurement: samples, sizes, environment.')),
                        ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='ceilings', to='reruns.rerunjob')),
                    ],
                    options={
                        'db_table': 'registry_measuredceiling',
                        'ordering': ['gpu_slug', '-measured_at'],
                    },
                ),
                migrations.AddIndex(
                    model_name='rerunjob',
                    index=models.Index(fields=['state', 'heartbeat_at'], name='registry_re_state_1cc077_idx'),
                ),
                migrations.AddConstraint(
                    model_name='rerunjob',
                    constraint=models.UniqueConstraint(condition=models.Q(('kind', 'rerun'), ('state__in', ['queued', 'running'])), fields=('run',), name='one_active_rerun_per_run'),
                ),
                migrations.AddConstraint(
                    model_name='rerunjob',
                    constraint=models.UniqueConstraint(condition=models.Q(('kind', 'measure'), ('state__in', ['queued', 'running'])), fields=('workload', 'provider', 'operation_mode', 'metric', 'gpu_slug'), name='one_active_measure_per_target'),
                ),
                migrations.AddConstraint(
                    model_name='rerunjob',
                    constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['measure', 'ceilings']), ('run__isnull', False), _connector='OR'), name='rerun_has_a_run'),
                ),
                migrations.AddConstraint(
                    model_name='rerunjob',
                    constraint=models.CheckConstraint(condition=models.Q(('kind', 'ceilings'), models.Q(('kernel__isnull', False), ('workload__isnull', False)), _connector='OR'), name='job_has_a_workload'),
                ),
                migrations.AddConstraint(
                    model_name='rerunjob',
                    constraint=models.UniqueConstraint(condition=models.Q(('kind', 'ceilings'), ('state__in', ['queued', 'running'])), fields=('gpu_slug',), name='one_active_ceilings_per_gpu'),
                ),
                migrations.AddConstraint(
                    model_name='measuredceiling',
                    constraint=models.UniqueConstraint(fields=('gpu_slug', 'measured_at'), name='one_ceiling_per_measurement'),
                ),
                migrations.AddConstraint(
                    model_name='measuredceiling',
                    constraint=models.CheckConstraint(condition=models.Q(('bf16_tflops__gt', 0), ('memory_bandwidth__gt', 0)), name='ceiling_positive'),
                ),
            ],
        ),
        migrations.RunPython(contenttypes_forward, contenttypes_backward),
    ]
