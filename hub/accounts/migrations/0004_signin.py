# Site sign-in (issue 52): identities at the IdP, and the device grant's codes and refresh tokens.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0003_token_expiry'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='DeviceAuthorization',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('device_code_hash', models.CharField(max_length=64, unique=True)),
                ('user_code', models.CharField(max_length=9, unique=True)),
                ('client_id', models.CharField(max_length=100)),
                ('scope', models.CharField(choices=[('read', 'Read'), ('write', 'Write')], default='write', max_length=8)),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('approved', 'Approved'), ('denied', 'Denied'), ('used', 'Used')], default='pending', max_length=8)),
                ('created', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField()),
                ('interval', models.PositiveIntegerField()),
                ('last_polled', models.DateTimeField(blank=True, null=True)),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='RefreshToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key_hash', models.CharField(max_length=64, unique=True)),
                ('client_id', models.CharField(max_length=100)),
                ('scope', models.CharField(choices=[('read', 'Read'), ('write', 'Write')], max_length=8)),
                ('created', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField()),
                ('used', models.DateTimeField(blank=True, null=True)),
                ('access', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='accounts.apitoken')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='refresh_tokens', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='ExternalIdentity',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('issuer', models.CharField(help_text='The OIDC issuer URL, or ldap: and the server URI.', max_length=300)),
                ('subject', models.CharField(help_text="The OIDC 'sub' claim, or the LDAP DN.", max_length=300)),
                ('orcid', models.CharField(blank=True, max_length=40)),
                ('created', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_signed_in', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='identities', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('issuer', 'subject'), name='identity_issuer_subject')],
            },
        ),
    ]
