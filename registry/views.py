from django.shortcuts import get_object_or_404, render

from registry.models import BenchmarkRun, Kernel, Source


def home(request):
    kernels = Kernel.objects.order_by("name")
    return render(
        request, "registry/home.html", {"kernels": kernels, "run_count": BenchmarkRun.objects.count()}
    )


def run_detail(request, pk):
    run = get_object_or_404(BenchmarkRun.objects.public(), pk=pk)
    return render(request, "registry/run_detail.html", {"run": run})


def kernel_detail(request, slug):
    kernel = get_object_or_404(Kernel, slug=slug)
    runs = BenchmarkRun.objects.public().filter(kernel=kernel)[:200]
    return render(request, "registry/kernel_detail.html", {"kernel": kernel, "runs": runs})


def source_detail(request, slug):
    source = get_object_or_404(Source, slug=slug)
    return render(
        request, "registry/source_detail.html", {"source": source, "imports": source.imports.all()[:50]}
    )
